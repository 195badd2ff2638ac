"""ldp-telemetry's client SDK: perturb on the device, then report.

``client_sdk.mechanisms`` is the protocol (standard library only, no I/O).
"""

from __future__ import annotations

from client_sdk import mechanisms

__all__ = ["mechanisms"]
__version__ = "0.1.0"
