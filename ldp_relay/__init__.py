"""``ldp relay``: an Oblivious HTTP relay (RFC 9458) in front of a collector's gateway.

Meant to be run by a party other than the collector's operator. It forwards each
``message/ohttp-req`` body to the gateway unread, with no header of the device and none of
its own but ``Content-Type``, passes the gateway's answer back, and keeps the per-device
admission limits (it is the one that sees the device's address); it logs nothing about a
device. In full: ``docs/guides/relay.md``.

The app is :func:`ldp_relay.forward.create_relay` (gunicorn:
``'ldp_relay.forward:create_relay()'``); this package imports nothing itself, so
``ldp --help`` does not load the web stack.
"""
