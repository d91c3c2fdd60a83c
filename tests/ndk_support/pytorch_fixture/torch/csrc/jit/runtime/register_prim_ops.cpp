// Fixture: schema strings as PyTorch registers its non-native operators (register_prim_ops.cpp).
static const char* schemas[] = {
    "aten::__contains__.int_list(int[] l, int item) -> bool",
    "aten::__getitem__.t(t[](a) list, int idx) -> t(*)",
    "aten::_set_item.t(t[](a!) l, int idx, t(b -> *) el) -> t[](a!)",
    "aten::add.str(str a, str b) -> str",
    "aten::append.t(t[](a!) self, t(c -> *) el) -> t[](a!)",
    "aten::eq.int(int a, int b) -> bool",
    "aten::len.t(t[] a) -> int",
    "aten::ne.int(int a, int b) -> bool",
    "prim::unchecked_cast(t x) -> t",
};
