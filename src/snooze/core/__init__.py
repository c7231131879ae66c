"""The numpy-only core: config, errors, classification, advantages, the scheduler, metrics, state.

Nothing under ``snooze.core`` imports torch, a trainer, an integration or the CLI.
"""
