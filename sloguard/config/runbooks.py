"""Where each built-in alert's runbook is: `runbook_url_template` with the alert's name filled in.

The default points at the runbook pages in the repository (docs/runbooks/<AlertName>.md, rendered by GitHub and
by the docs site); a team that hosts the site or its own copies sets the template to their address.
"""

from __future__ import annotations

PLACEHOLDER = "{alertname}"
DEFAULT_TEMPLATE = "https://github.com/sloguard/sloguard/blob/main/docs/runbooks/{alertname}.md"


def runbook_url(template: str, alertname: str) -> str:
    """Return the runbook address of one alert ("" when the template is empty: no runbook_url annotation)."""
    return template.replace(PLACEHOLDER, alertname)
