#!/usr/bin/env python3
"""Seed 004's GitHub tool, reduced to a demo: JSON in on stdin, JSON out."""
import json
import sys

request = json.load(sys.stdin)
json.dump({"tool": "github", "ok": True, "echo": request}, sys.stdout)
