"""The native exact full encoder (``encoder.NativeEncoder``; C in ``_native``)."""
