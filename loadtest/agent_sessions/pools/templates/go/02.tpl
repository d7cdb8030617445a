// «C1» «doc1»
type «C1» struct {
    «C2»    string            `json:"«id1»"`
    Count   int               `json:"count,omitempty"`
    Labels  map[string]string `json:"labels,omitempty"`
    Updated time.Time         `json:"updated_at"`
}

func (x *«C1») «C3»(ctx context.Context, n int) (int, error) {
    if n < 0 {
        return 0, fmt.Errorf("«w1»: negative count %d", n)
    }
    select {
    case <-ctx.Done():
        return 0, ctx.Err()
    default:
    }
    x.Count += n
    return x.Count, nil
}

