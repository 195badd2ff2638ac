"""Oblivious HTTP (RFC 9458) for the SDK and the collector's gateway.

:mod:`~client_sdk.ohttp.bhttp` (Binary HTTP, RFC 9292) and :mod:`~client_sdk.ohttp.keys`
(key configurations) are standard library only; :mod:`~client_sdk.ohttp.encapsulation`
needs the ``ldp-telemetry[ohttp]`` extra (pyhpke, cryptography), imported by its first
call; :mod:`~client_sdk.ohttp.transport` sends the SDK's uploads through a relay.
In full: ``docs/reference/ohttp.md``.
"""
