"""Thresholds and the checks made against them (no pytest, no HTTP)."""

from .thresholds import ScenarioFloors, Shortfall, Thresholds, default_thresholds_path, load_thresholds, shortfalls

__all__ = ["ScenarioFloors", "Shortfall", "Thresholds", "default_thresholds_path", "load_thresholds", "shortfalls"]
