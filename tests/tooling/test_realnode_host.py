"""What the real nodes' host restore deletes from iptables: only rules that lead into the chains the
nodes made, never the chains' own rules or anyone else's."""

from __future__ import annotations

from localcluster.realnode.host import rules_jumping_to

RULES = """-P INPUT ACCEPT
-P OUTPUT ACCEPT
-N KUBE-FIREWALL
-N KUBE-KUBELET-CANARY
-N DOCKER-USER
-A INPUT -j KUBE-FIREWALL
-A OUTPUT -m comment --comment "kubelet" -j KUBE-FIREWALL
-A OUTPUT -j DOCKER-USER
-A FORWARD -g KUBE-KUBELET-CANARY
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -j DROP
-A DOCKER-USER -j RETURN
"""


def test_only_rules_leading_into_the_new_chains_are_chosen() -> None:
    found = rules_jumping_to(RULES, {"KUBE-FIREWALL", "KUBE-KUBELET-CANARY"})
    assert found == [
        ["INPUT", "-j", "KUBE-FIREWALL"],
        ["OUTPUT", "-m", "comment", "--comment", "kubelet", "-j", "KUBE-FIREWALL"],
        ["FORWARD", "-g", "KUBE-KUBELET-CANARY"],
    ]


def test_nothing_is_chosen_when_no_chain_is_new() -> None:
    assert rules_jumping_to(RULES, set()) == []
    assert rules_jumping_to(RULES, {"KUBE-PROXY-CANARY"}) == []
