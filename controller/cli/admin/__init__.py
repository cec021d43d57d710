"""Provisioning and access: setup of a control host, signing keys, API tokens, bundled helpers and skills."""
