"""What runs on a node to serve a recipe, as decisions the serving and router roles act on.

containers.py  one container spec per GPU group: the recipe's rendered command + hgxkit's overrides
               (name, bound ports, labels, image by digest, API key), and its spec hash
rollout.py     which containers to keep, replace (group by group) or remove
policy.py      exposure (who can reach the API) and HiCache host-RAM checks
image.py       the image by digest: pull, read the repository digest, the record on the node
router.py      the optional SGLang router: its host, worker URLs and container spec
multinode.py   a server spanning nodes: placement (hosts -> ranks, head address), member differences,
               the group's spec hash, rollout and recovery decisions
nodegroups.py  multi-node groups as a pyinfra run sees them (inventory hosts, members' facts)
groupcmd.py    the node commands of a multi-node preflight and rollout
facts.py       pyinfra facts about the managed containers, the router and host ports
"""
