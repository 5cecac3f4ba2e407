"""The HTTP push endpoint: producers in any language push job specs over HTTP.

- :mod:`~jobkit.endpoint.options`: ``[push_endpoint]`` in jobs.toml
- :mod:`~jobkit.endpoint.service`: a request in, an answer per job out (what every server of it runs)
- :mod:`~jobkit.endpoint.control`: a request's cancellations, and a GET of a job's status
- :mod:`~jobkit.endpoint.signature`: the producer signature of ``auth = "hmac"``
- :mod:`~jobkit.endpoint.secret_key`: the key it is checked with, from Secrets Manager
- :mod:`~jobkit.endpoint.lambda_handler`: the deployed function (a Lambda function URL)

The local stack serves it too (:mod:`jobkit.local.push_route`). See docs/push-endpoint.md.
"""
