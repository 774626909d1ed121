"""The testkit inside other tools: the judge's dimensions as deepeval metrics (:mod:`.deepeval_metrics`)."""
