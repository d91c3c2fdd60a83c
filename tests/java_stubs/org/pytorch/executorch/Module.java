package org.pytorch.executorch;
// Signature stub (docs/facts.md EA1): the members shared by executorch-android 1.0.1 (Module.java) and v1.4.1 /
// main (Module.kt, where load is @JvmStatic @JvmOverloads). Neither Closeable (1.0.1 is not) nor loadMethod
// (int in 1.0.1, void in 1.4.1) is declared: code using them would not compile against both.
public class Module {
    public static final int LOAD_MODE_FILE = 0;
    public static final int LOAD_MODE_MMAP = 1;
    public static final int LOAD_MODE_MMAP_USE_MLOCK = 2;
    public static final int LOAD_MODE_MMAP_USE_MLOCK_IGNORE_ERRORS = 3;
    private Module() {}
    public static Module load(String modelPath) { throw new RuntimeException("Stub!"); }
    public static Module load(String modelPath, int loadMode) { throw new RuntimeException("Stub!"); }
    public static Module load(String modelPath, int loadMode, int numThreads) { throw new RuntimeException("Stub!"); }
    public EValue[] forward(EValue... inputs) { throw new RuntimeException("Stub!"); }
    public EValue[] execute(String methodName, EValue... inputs) { throw new RuntimeException("Stub!"); }
    public void destroy() { throw new RuntimeException("Stub!"); }
}
