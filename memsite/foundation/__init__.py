"""The foundation: definitions every floor shares (errors, settings, the Memory record, the file format,
input checks, secrets, words, decay), none of them reading or writing memories.

It imports nothing of memsite above it (``tests/test_layers.py``).
"""
