"""Judge calibration: a shipped set of dialogues with scores known by construction, the command that
judges them (``personalens calibrate``), and the report a run can show beside its scores."""
