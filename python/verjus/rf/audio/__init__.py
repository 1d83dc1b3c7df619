"""``rf.audio``: audio features after RETURNN's ``returnn/frontend/audio`` and
``signal.py``: ``stft`` (real and imaginary parts on a pair dim, as verjus has
no complex dtype), ``mel_filterbank``, ``log_mel_filterbank_from_raw`` and
SpecAugment (``specaugment``, ``random_mask``, ``mask``), each in its own
module here.
"""

from verjus.rf.audio.mel import log_mel_filterbank_from_raw, mel_filterbank
from verjus.rf.audio.specaugment import mask, random_mask, specaugment
from verjus.rf.audio.stft import stft

__all__ = [
    "log_mel_filterbank_from_raw",
    "mask",
    "mel_filterbank",
    "random_mask",
    "specaugment",
    "stft",
]
