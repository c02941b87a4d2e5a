"""Credential detection for text about to be written into memory.

The rules are ported from common secret scanners (gitleaks, detect-secrets):
provider token formats with fixed prefixes, private key blocks, and an
assignment rule (``password = ...``) that only fires on high-entropy values,
so prose about passwords and keys is still accepted.

A finding names the rule and the line and never echoes the secret itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    pattern: re.Pattern[str]
    triggers: tuple[str, ...]  # lowercase text the pattern cannot match without
    min_entropy: float = 0.0  # Shannon bits per char of group 'value' (or the match)


def _rule(name: str, description: str, pattern: str, triggers: str, min_entropy: float = 0.0) -> Rule:
    return Rule(name, description, re.compile(pattern), tuple(triggers.split()), min_entropy)


RULES: tuple[Rule, ...] = (
    _rule("private-key", "a private key block", r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY( BLOCK)?-----", "-----begin"),
    _rule("aws-access-key-id", "an AWS access key id", r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b",
          "a3t akia asia abia acca"),
    _rule("aws-secret-access-key", "an AWS secret access key",
          r"(?i)aws.{0,20}?(?:secret|private)?.{0,20}?['\"]?(?P<value>[A-Za-z0-9/+=]{40})['\"]?(?![A-Za-z0-9/+=])",
          "aws", 4.0),
    _rule("github-token", "a GitHub token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b",
          "ghp_ gho_ ghu_ ghs_ ghr_"),
    _rule("github-fine-grained-pat", "a GitHub fine-grained token", r"\bgithub_pat_[A-Za-z0-9_]{82}\b", "github_pat_"),
    _rule("gitlab-token", "a GitLab token", r"\bglpat-[A-Za-z0-9_-]{20,}\b", "glpat-"),
    _rule("slack-token", "a Slack token", r"\bxox[abposr]-(?:[A-Za-z0-9]+-){1,4}[A-Za-z0-9]{8,}\b", "xox"),
    _rule("slack-webhook", "a Slack webhook URL",
          r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/]{43,56}", "hooks.slack.com"),
    _rule("stripe-key", "a Stripe secret key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,99}\b",
          "sk_live_ sk_test_ rk_live_ rk_test_"),
    _rule("google-api-key", "a Google API key", r"\bAIza[0-9A-Za-z_-]{35}\b", "aiza"),
    _rule("openai-api-key", "an OpenAI API key",
          r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}\b", "t3blbkfj"),
    _rule("openai-project-key", "an OpenAI project key", r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}\b",
          "sk-proj- sk-svcacct- sk-admin-"),
    _rule("anthropic-api-key", "an Anthropic API key", r"\bsk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{80,}\b", "sk-ant-"),
    _rule("huggingface-token", "a Hugging Face token", r"\bhf_[A-Za-z]{34}\b", "hf_"),
    _rule("npm-token", "an npm token", r"\bnpm_[A-Za-z0-9]{36}\b", "npm_"),
    _rule("pypi-token", "a PyPI upload token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}", "pypi-ageichlwas5vcmc"),
    _rule("sendgrid-key", "a SendGrid API key", r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b", "sg."),
    _rule("twilio-key", "a Twilio API key", r"\bSK[0-9a-fA-F]{32}\b", "sk", 3.0),
    _rule("jwt", "a JSON Web Token", r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}", "eyj"),
    _rule("url-credentials", "a password inside a URL",
          r"\b[a-z][a-z0-9+.-]*://[^\s:/@]{1,64}:(?P<value>[^\s:/@]{6,128})@[^\s/]+", "://", 2.5),
    _rule("generic-credential", "a credential assigned in text",
          r"(?i)\b(?:api[_-]?key|apikey|secret(?:[_-]?key)?|access[_-]?token|auth[_-]?token|password|passwd|pwd|token"
          r"|client[_-]?secret)\b[\"']?\s{0,5}(?:[:=]|=>|:=)\s{0,5}[\"']?(?P<value>[A-Za-z0-9_+/=.~!@#$%^&*-]{16,})",
          "key secret token passw pwd", 3.5),
)


@dataclass(frozen=True)
class Finding:
    rule: str
    description: str
    line: int


def _entropy(text: str) -> float:
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


_TRIGGERS = tuple(sorted({t for rule in RULES for t in rule.triggers}))


def scan(text: str) -> list[Finding]:
    """Every credential-looking span in ``text``, one finding per rule and line."""
    rules = rules_for(text)
    return matches(text, rules) if rules else []


def rules_for(text: str) -> list[Rule]:
    """The rules that can match in ``text``: those whose literal trigger it holds (most text holds none).

    Triggers hold no whitespace, so text made of pieces of ``text`` (words
    cut out, spaces collapsed) leaves no more rules to run than it does.
    """
    lowered = text.lower()
    present = {t for t in _TRIGGERS if t in lowered}
    if not present:
        return []
    return [rule for rule in RULES if not present.isdisjoint(rule.triggers)]


def matches(text: str, rules: Sequence[Rule]) -> list[Finding]:
    """What ``rules`` find in ``text`` (see :func:`scan`)."""
    findings: list[Finding] = []
    seen: set[tuple[str, int]] = set()
    for rule in rules:
        for match in rule.pattern.finditer(text):
            if rule.min_entropy:
                value = match.groupdict().get("value") or match.group(0)
                if _entropy(value) < rule.min_entropy:
                    continue
            line = text.count("\n", 0, match.start()) + 1
            if (rule.name, line) not in seen:
                seen.add((rule.name, line))
                findings.append(Finding(rule.name, rule.description, line))
    findings.sort(key=lambda f: f.line)
    return findings
