"""What ``personalens init`` writes into a team's repository: a suite file, a config with a bot entry,
thresholds.yaml and CI workflows. The CI workflows are also the recipes shown in examples/ci."""
