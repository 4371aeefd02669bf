"""Neural networks on the engine: modules and losses (modules.py), optimizers (optim.py), toy data (data.py).

>>> import minigrad as mg
>>> layer = mg.nn.Linear(3, 2)
>>> [p.shape for p in layer.parameters()]
[(3, 2), (2,)]
"""
from . import data, modules, optim
from .modules import (Parameter, Module, Linear, ReLU, Tanh, Sigmoid, Sequential, MSELoss, CrossEntropyLoss,
                      DynamicNet, History, LOSSES, get_loss, bind_parameters)
