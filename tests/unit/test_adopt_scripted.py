"""converter.export._adopt_scripted_children puts the scripted copies of a model's children in their place, and only
scripted modules (torch's public torch.jit.ScriptModule, not a look at its private ``_c``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from converter.export import _adopt_scripted_children  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(3, 2)
        self.head = torch.nn.ReLU()
        self.quant = torch.nn.Identity()

    def forward(self, x):
        return self.head(self.body(self.quant(x)))


class NotScripted:
    """Stands for a scripted model whose attribute of a child's name is no module (a constant it kept)."""

    body = torch.nn.Linear(3, 2)  # a plain module, not a scripted one
    head = 3
    original_name = "Net"


def test_the_scripted_children_take_the_place_of_the_model_s_and_nothing_else_does():
    model = Net()
    scripted = torch.jit.script(model)
    _adopt_scripted_children(model, scripted)
    assert model.body is scripted.body and model.head is scripted.head
    assert isinstance(model.body, torch.jit.ScriptModule) and not isinstance(model.quant, torch.jit.ScriptModule)
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(model(x), scripted(x))

    plain = Net()
    kept = (plain.body, plain.head)
    _adopt_scripted_children(plain, NotScripted())
    assert (plain.body, plain.head) == kept
