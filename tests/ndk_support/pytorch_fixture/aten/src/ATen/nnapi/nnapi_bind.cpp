// Fixture in the shape of the Nov 2020 aten/src/ATen/nnapi/nnapi_bind.cpp registration.
TORCH_LIBRARY(_nnapi, m) {
  m.class_<NnapiCompilation>("Compilation")
    .def(torch::jit::init<>())
    .def("init", &NnapiCompilation::init)
    .def("run", &NnapiCompilation::run)
    ;
}
