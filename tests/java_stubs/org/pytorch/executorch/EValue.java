package org.pytorch.executorch;
// Signature stub (docs/facts.md EA3): EValue.from(Tensor) is @JvmStatic in EValue.kt (v1.4.1); isTensor is the
// JVM getter of its `val isTensor`. Final as the Kotlin class is (1.0.1's Java class was not).
public final class EValue {
    private EValue() {}
    public static EValue from(Tensor tensor) { throw new RuntimeException("Stub!"); }
    public Tensor toTensor() { throw new RuntimeException("Stub!"); }
    public boolean isTensor() { throw new RuntimeException("Stub!"); }
}
