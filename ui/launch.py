"""`python -m ui.launch run server.py [options]`: Streamlit's own command line (what start.sh and
`attention-explorer serve` run), without the one request it makes to the internet.

Started without a display (`server.headless`, Streamlit's default on such a machine), Streamlit
asks checkip.amazonaws.com for the machine's public address before it listens, to print an
"External URL" line (streamlit/net_util.py `get_external_ip`; no setting turns it off, see
Streamlit's open issue #8364 "Server hangs on startup when offline"). Offline it fails at once;
on a network whose name server does not answer, the lookup waits for the resolver, which
requests' one-second timeout does not bound, before the server listens. A lecturer's class
needs the "Network URL" line, which Streamlit finds without sending anything, so here the
public address is simply unknown: the banner keeps its local and network addresses.
"""

from __future__ import annotations

import sys


def main() -> None:
    from streamlit import net_util
    from streamlit.web import cli

    net_util.get_external_ip = lambda: None  # no request leaves the machine (see above)
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
