"""The prompt templates (our own words for the benchmark's prompts) and the text blocks that fill them."""
