package org.pytorch;

/**
 * Working fake: remembers the inputs of the last forward (so a test can inspect exactly what the app fed
 * the model) and returns a [1, 1] float tensor.
 */
public final class Module {
    public static IValue[] lastInputs;

    public static Module load(String modelPath) {
        return new Module();
    }

    public IValue forward(IValue... inputs) {
        lastInputs = inputs.clone();
        return IValue.from(Tensor.fromBlob(Tensor.allocateFloatBuffer(1), new long[] {1, 1}));
    }

    public void destroy() {
    }
}
