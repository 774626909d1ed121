"""A provider's batch engine: many chat calls sent as one job, answered within hours at about half the on-demand
price (:mod:`.jobs`: what every engine takes and gives; :mod:`.openai_batch`: the OpenAI Batch API;
:mod:`.bedrock_batch`: Amazon Bedrock batch inference)."""
