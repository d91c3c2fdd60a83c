package org.pytorch.executorch;

/** Working fake of executorch-android's EValue: a tagged value; only Tensor values are needed here. */
public final class EValue {
    private final Tensor tensor;

    private EValue(Tensor tensor) {
        this.tensor = tensor;
    }

    public static EValue from(Tensor tensor) {
        return new EValue(tensor);
    }

    public boolean isTensor() {
        return tensor != null;
    }

    public Tensor toTensor() {
        if (tensor == null) {
            throw new IllegalStateException("Expected EValue type Tensor");
        }
        return tensor;
    }
}
