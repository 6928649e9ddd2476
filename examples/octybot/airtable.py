#!/usr/bin/env python3
"""Seed 004's Airtable tool, reduced to a demo: JSON in on stdin, JSON out."""
import json
import sys

request = json.load(sys.stdin)
json.dump({"tool": "airtable", "ok": True, "echo": request}, sys.stdout)
