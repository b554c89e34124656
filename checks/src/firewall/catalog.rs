//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[entry(
    RULES,
    "warn",
    "a local firewall filters input and does not plainly allow the master port or NCCL's \
         high ports, or its output path drops this node's own new connections to them",
    "A dropped master port makes every other node wait for the rendezvous timeout: `The \
         client socket has timed out after 900s while trying to connect to (addr, 29500)`. \
         Allowing only the master port is not enough: NCCL listens on random high ports \
         (32768-60999), and a dropped one gives `Call to connect timeout` and a watchdog \
         timeout after 600 s. Also warns when ufw/firewalld is active but its rules could not \
         be read.",
    "Accept the cluster's subnet (or the master port and 32768-60999/tcp) with the firewall \
         the node runs: `sudo ufw allow from <subnet>`, \
         `sudo firewall-cmd --zone=trusted --add-source=<subnet>`, \
         `sudo nft insert rule inet filter input ip saddr <subnet> accept` or \
         `sudo iptables -I INPUT -s <subnet> -j ACCEPT`. When the OUTPUT chain (or an \
         nftables output hook, or ufw's outgoing default) drops the node's own connections, \
         an INPUT rule does not help: let them out (`sudo iptables -I OUTPUT -d <subnet> -j \
         ACCEPT`, `sudo ufw allow out to <subnet>`). The finding prints the exact command \
         for the firewall it found.",
)
.node(Action::DrainAndRepair)];
