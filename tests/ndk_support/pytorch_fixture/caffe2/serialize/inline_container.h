// Fixture: the reader's supported file format versions, as in PyTorch of Nov 2020.
constexpr uint64_t kMinSupportedFileFormatVersion = 0x1L;
constexpr uint64_t kMaxSupportedFileFormatVersion = 0x5L;
