"""Provisioning control hosts: ``panio setup`` builds wheels, writes an inventory, runs the playbooks.

    wheelhouse.py   panio's wheel (reproducible) and its dependencies' wheels, pinned to this venv
    inventory.py    the Ansible inventory of one host, from the lab file
    playbook.py     ansible-playbook as a child, its JSON-lines progress read and shown

The playbooks and roles live in ``ansible/`` at the repository root.
"""
