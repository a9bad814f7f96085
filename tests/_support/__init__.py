"""Helpers shared by tests of several folders (plain functions and classes, not fixtures):
each written once here instead of once per test file.

- :mod:`tests._support.cli`: the ``gptools`` command as a child process, and waiting for
  a server it started to be ready.
- :mod:`tests._support.campaigns`: a campaign request the sandbox accepts.
- :mod:`tests._support.generated_log`: a delivery log of campaign play at any size, and its
  campaigns.
- :mod:`tests._support.stores`: a SQLite store whose "disk" fills up.
- :mod:`tests._support.proxy`: a TCP proxy that starts closed or open, can be cut, hung
  and opened again, and counts the connections it accepts.
- :mod:`tests._support.tools`: programs the tests drive, installed when missing.
"""
