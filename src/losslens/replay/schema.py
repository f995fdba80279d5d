"""The version of replay's JSON report (``"schema"``), shared by the request that answers it and
the engine that fills it, without either importing the other."""

SCHEMA = "losslens.replay/1"
