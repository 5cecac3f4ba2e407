"""Large params in the payload bucket: a job whose message would not fit in
SQS (or is over the declared threshold) carries a reference to its params
instead of the params, and the runner fetches them before anything reads them.

- :mod:`jobkit.payloads.reference`: the reference (wire version 3's
  ``paramsRef``), the object's key, and a body's two forms.
- :mod:`jobkit.payloads.store`: the bucket (an S3 client, injected): upload,
  and a fetch that checks the size and the SHA-256.
- :mod:`jobkit.payloads.offload`: what push does with a job's message that is
  too large.

Nothing here creates a client or reads the environment at import time.
"""

from __future__ import annotations
