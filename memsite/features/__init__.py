"""The features: recall, world state, the task protocol, sessions, sync, purge, review, `memsite check`...

Each builds on :class:`memsite.storage.Storage` (opened by :func:`opening.open_storage`) and may import the
floors below (storage, git, foundation) and other features, never the facade or the surfaces above it
(``tests/test_layers.py``).
"""
