"""Reference experiments built on the trainer (torch needed): ``snooze.experiments.compare``."""
