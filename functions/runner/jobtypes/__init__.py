"""Example job types, modelled on MediaWiki's. Declared in infra/jobs.toml.

They act on a stand-in wiki (no database, no CDN), so the demo and the tests
can run them anywhere; the shapes (root jobs, leaves, params) are the real ones.
"""
