func Test«C1»(t *testing.T) {
    tests := []struct {
        name string
        in   string
        want int
    }{
        {"empty", "", 0},
        {"ascii", "«s1»", «x1»},
        {"cjk", "日本語のテキスト", 8},
    }
    for _, tt := range tests {
        t.Run(tt.name, func(t *testing.T) {
            if got := «C2»(tt.in); got != tt.want {
                t.Errorf("«C2»(%q) = %d, want %d", tt.in, got, tt.want)
            }
        })
    }
}

