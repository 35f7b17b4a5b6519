"""Arena: the ratings fitted to judged battles between models' answers (the battles and their judges: judging/)."""
