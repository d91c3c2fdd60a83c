package org.pytorch.executorch;
import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
// Signature stub (docs/facts.md EA2): static factories are @JvmStatic in Tensor.kt (v1.4.1), the data getters the
// JVM names of its `val dataAsFloatArray` / `dataAsUnsignedByteArray`; the same names as Tensor.java in 1.0.1.
public abstract class Tensor {
    Tensor() {}
    public static ByteBuffer allocateByteBuffer(int numElements) { throw new RuntimeException("Stub!"); }
    public static FloatBuffer allocateFloatBuffer(int numElements) { throw new RuntimeException("Stub!"); }
    public static Tensor fromBlob(float[] data, long[] shape) { throw new RuntimeException("Stub!"); }
    public static Tensor fromBlob(FloatBuffer data, long[] shape) { throw new RuntimeException("Stub!"); }
    public static Tensor fromBlobUnsigned(byte[] data, long[] shape) { throw new RuntimeException("Stub!"); }
    public static Tensor fromBlobUnsigned(ByteBuffer data, long[] shape) { throw new RuntimeException("Stub!"); }
    public long numel() { throw new RuntimeException("Stub!"); }
    public long[] shape() { throw new RuntimeException("Stub!"); }
    public float[] getDataAsFloatArray() { throw new RuntimeException("Stub!"); }
    public byte[] getDataAsUnsignedByteArray() { throw new RuntimeException("Stub!"); }
}
