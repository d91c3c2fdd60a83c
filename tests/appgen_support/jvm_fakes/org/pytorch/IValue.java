package org.pytorch;

/** Working fake: wraps one Tensor. */
public final class IValue {
    private final Tensor tensor;

    private IValue(Tensor tensor) {
        this.tensor = tensor;
    }

    public static IValue from(Tensor tensor) {
        return new IValue(tensor);
    }

    public Tensor toTensor() {
        return tensor;
    }
}
