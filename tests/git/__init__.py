"""Tests of memsite's git plumbing (memsite/git/), one file per module, checked against git itself."""
