package org.pytorch;
import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
public abstract class Tensor {
    public static FloatBuffer allocateFloatBuffer(int numElements) { throw new RuntimeException("Stub!"); }
    public static ByteBuffer allocateByteBuffer(int numElements) { throw new RuntimeException("Stub!"); }
    public static Tensor fromBlob(FloatBuffer data, long[] shape) { throw new RuntimeException("Stub!"); }
    public static Tensor fromBlob(float[] data, long[] shape) { throw new RuntimeException("Stub!"); }
    public static Tensor fromBlobUnsigned(ByteBuffer data, long[] shape) { throw new RuntimeException("Stub!"); }
    public static Tensor fromBlobUnsigned(byte[] data, long[] shape) { throw new RuntimeException("Stub!"); }
    public long[] shape() { throw new RuntimeException("Stub!"); }
    public float[] getDataAsFloatArray() { throw new RuntimeException("Stub!"); }
    public byte[] getDataAsUnsignedByteArray() { throw new RuntimeException("Stub!"); }
}
