"""Shared by test_control_*.py and test_tensors_*.py: the nodes of a traced graph with a given op name."""


def _nodes(graph, name):
    return [n for n in graph.walk() if n.op.name == name]
