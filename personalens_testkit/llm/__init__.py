"""Chat models: one protocol, backends by spec string, the embedded server."""

from .base import ChatModel, ChatRequest, ChatResponse, Message
from .registry import ModelContext, check_spec, create_model, local_settings_for

__all__ = [
    "ChatModel", "ChatRequest", "ChatResponse", "Message", "ModelContext", "check_spec", "create_model",
    "local_settings_for",
]
