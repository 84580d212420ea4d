"""attn's logger, ``logging.getLogger("attn")``, configured from ``ATTN_LOGLEVEL``.

``ATTN_LOGLEVEL`` is ``DEBUG``, ``INFO``, ``WARNING`` (the default) or
``ERROR``, in any case. When it is set, the ``attn`` logger gets a handler
of its own on stderr (``attn INFO: ...``) and does not propagate to the root
logger (the message is not printed twice); when it is unset, the level is
WARNING and records propagate to whatever the application configured, so
``logging.getLogger("attn").setLevel(logging.INFO)`` with the application's
own handlers works too. An unknown value warns (naming the valid ones) and
falls back to WARNING.

What is logged: at INFO, every compile (what: kernel module, tile
candidate, variants, arch, cache key; and how long it took, per stage); at
DEBUG, kernel cache hits (memory or disk) and misses.

>>> parse_level("info")
(20, None)
>>> parse_level("loud")[0], "DEBUG, INFO, WARNING, ERROR" in parse_level("loud")[1]
(30, True)
"""

import logging
import os
import sys
import warnings

LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING, "ERROR": logging.ERROR}
ENV = "ATTN_LOGLEVEL"

logger = logging.getLogger("attn")
_handler = None


def parse_level(value):
    """(logging level, problem or None) of an ``ATTN_LOGLEVEL`` value; None
    or empty is WARNING, an unknown value WARNING with the problem said."""
    if value is None or not str(value).strip():
        return logging.WARNING, None
    name = str(value).strip().upper()
    if name in LEVELS:
        return LEVELS[name], None
    return logging.WARNING, (f"attn: {ENV}={value!r} is not a log level; use one of "
                             f"{', '.join(LEVELS)} (falling back to WARNING)")


def configure(value=None, stream=None):
    """Sets the ``attn`` logger from ``value`` (default: ``$ATTN_LOGLEVEL``);
    returns the level. Called once when attn is imported; call it again
    after changing the variable."""
    global _handler
    if value is None:
        value = os.environ.get(ENV)
    level, problem = parse_level(value)
    logger.setLevel(level)
    if _handler is not None:
        logger.removeHandler(_handler)
        _handler = None
    if value is not None and str(value).strip():
        _handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
        _handler.setFormatter(logging.Formatter("attn %(levelname)s: %(message)s"))
        logger.addHandler(_handler)
        logger.propagate = False
    else:
        logger.propagate = True
    if problem:
        warnings.warn(problem, RuntimeWarning, stacklevel=2)
    return level
