"""ldp-telemetry's client SDK: perturb on the device, then report.

``client_sdk.mechanisms`` is the protocol (standard library only, no I/O);
:class:`Client` fetches metric definitions, perturbs each value on the spot and uploads
the perturbed reports in the background (standard library only as well).

>>> from client_sdk import mechanisms, Client
"""

from __future__ import annotations

from client_sdk import mechanisms
from client_sdk.client import Client

__all__ = ["Client", "mechanisms"]
__version__ = "0.1.0"
