"""Arena: pairwise battles between models' answers, their judges, and the ratings fitted to the verdicts."""
