package android.content;
public class Intent {
    public boolean getBooleanExtra(String name, boolean defaultValue) { throw new RuntimeException("Stub!"); }
    public int getIntExtra(String name, int defaultValue) { throw new RuntimeException("Stub!"); }
    public String getStringExtra(String name) { throw new RuntimeException("Stub!"); }
}
