"""Private helpers every layer shares (imports nothing else from posembed).

Files:

================== ========================================================================
file               what
================== ========================================================================
``checks``         argument checks with clear messages
``data``           the data files the package ships
``devices``        the device resolver, autocast, where a model runs (``DeviceError`` is in ``errors``)
``files``          checked reads of checkpoint files (JSON, safetensors headers)
``hints``          what to install for a missing optional package
``html``           the self-contained HTML report builder
``io``             atomic writes with the umask's mode
``logging``        log-once
``memory``         huge-page advice and memory figures
``names``          "did you mean" and every package's lazy ``__getattr__``
``progress``       one progress style for every layer
``torch_private``  the private torch calls, each checked to exist, with a public fallback
``times``          the measured run times ``--help`` and README quote
================== ========================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed._utils.<file>: imported on first use
